"""Bulk import of comparison pairs (docs/import-format.md).

``parse`` streams the file and ``validate`` checks each record, ``media`` reads the media the
pairs name (from the media folder, or by URL) and has ``annotation.media`` verify and strip
them, ``fetch`` gets images by URL behind an SSRF guard, ``archive`` unpacks uploaded media
safely, and ``importer.pairs_import`` writes everything in one transaction or nothing at all,
through ``writer`` (bulk rows; its raw SQL in ``sql``) with a reader thread (``threads``).
``services`` runs uploads as ``ImportJob``s, and ``progress`` records on the job how far an
import got. Imports core, models, decisions and media.
"""
