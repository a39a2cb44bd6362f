"""Generated views over ledger tables (visible rows, sign-weighted totals) arrive in part 3."""
