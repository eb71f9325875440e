"""Built-in catalog data (TOML), shipped as package data."""
