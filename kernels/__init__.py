"""SSD forward implementations: ours in cuTile, and adapters over the published baselines."""
