"""Packages for guests: host-side pip under its guards, the packages bundle, and what a template gives."""

