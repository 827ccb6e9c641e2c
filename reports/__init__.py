"""The HTML report: renders the results files of a run (``<run_dir>/raw/<suite>.json``) into a self-contained
page (``python -m reports.render``), keeps an index of every report, and compares two runs
(``python -m reports.compare``). Only reads results; never runs a suite.
"""
