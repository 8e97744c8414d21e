"""Bulk import of comparison pairs (DESIGN.md, "Import format").

``parse`` streams and validates the file, ``media`` verifies and stores images, ``fetch`` gets
images by URL behind an SSRF guard, ``archive`` unpacks uploaded media safely, and
``services.pairs_import`` writes everything in one transaction or nothing at all.
"""
