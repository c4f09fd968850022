"""Test doubles that speak real protocols (no patching of the libraries under test)."""
