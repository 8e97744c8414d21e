"""Accounts: one-time passwords and password changes (services), the account page and the first-
login redirect; imports core and models."""
