"""Importers: results of other harnesses, mapped onto ``raw.runs`` with the loader's rules."""
