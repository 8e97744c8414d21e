"""The audit log (docs/audit.md): who changed what, when, before and after."""
