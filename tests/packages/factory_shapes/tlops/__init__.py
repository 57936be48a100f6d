"""A small operator library on TileLang, written the way real ones are (factories, caches, configs)."""
