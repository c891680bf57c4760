"""Registered sizes and sha256 of the source archives, one TSV file per dataset."""
