"""gpuwise.catalog: GPU specs, price offers, and the one resolver of GPU names.

    from gpuwise.catalog import load_catalog, resolve_gpu, offers_for
    catalog = load_catalog()                       # built-in + ~/.config/gpuwise/catalog.toml
    gpu = resolve_gpu(catalog, "Tesla_T4")         # canonical id, alias or NVML name
    offers_for(catalog, gpu.id, provider="autodl") # cheapest per GPU-hour first
"""

from gpuwise.catalog.loader import builtin_catalog, load_catalog, missing_gpu_remedy, user_catalog_path
from gpuwise.catalog.model import GPU, PRECISIONS, Catalog, CatalogError, Offer
from gpuwise.catalog.resolve import name_key, offers_for, resolve_gpu

__all__ = [
    "GPU", "PRECISIONS", "Catalog", "CatalogError", "Offer",
    "builtin_catalog", "load_catalog", "missing_gpu_remedy", "name_key", "offers_for", "resolve_gpu",
    "user_catalog_path",
]
