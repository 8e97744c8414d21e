"""Versioned benchmark releases (docs/releases.md): which pairs go in (``selection``), the
rows read from the database (``rows``), the files written (``formats``, ``writer``, ``card``),
the manifest and archive (``archive``), and a built release read back (``read``). The services
that create, build and publish a ``Release`` are ``annotation.services.releases``."""
