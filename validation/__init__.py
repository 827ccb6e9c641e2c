"""The validation suites: registry, tolerances, comparisons, timing, provenance and results records."""
