"""Datasets as the console lists and previews them: the model and data catalogs, the previews."""
