"""The performance simulator: hardware and model catalogs, operator costs, the serving engine, config search."""
