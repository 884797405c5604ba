"""lightpath hardware models: parametric component models and the parts catalog."""
from hwmodels.parts import CatalogError, load_catalog, get_part, part_ids, lookup

__all__ = ["CatalogError", "load_catalog", "get_part", "part_ids", "lookup"]
