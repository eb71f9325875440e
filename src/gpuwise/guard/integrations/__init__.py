"""Callbacks for training frameworks, only for what those frameworks lack (imported lazily)."""
