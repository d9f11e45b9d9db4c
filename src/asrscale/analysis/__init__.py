"""A study's runs gathered into tables, analysed (baselines, speedups, the claims) and rendered."""
