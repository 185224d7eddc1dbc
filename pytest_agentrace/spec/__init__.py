"""Strict loaders for task (YAML) and trial (TOML) files. Every error is a ``SpecError`` naming file and key."""
