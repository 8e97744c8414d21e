"""Versioned benchmark releases (docs/releases.md): which pairs go in (``selection``), the
rows read from the database (``rows``), the files written (``formats``, ``writer``, ``card``),
the manifest and archive (``archive``), a built release read back (``read``)
and its files listed for downloads (``files``). The services
that create, build and publish a ``Release`` are ``services``, its reads ``selectors``, and
``diff`` and ``downloads`` serve the pages and API; imports core, models, agreement, imports,
leaderboard and pairs."""
