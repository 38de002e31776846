"""Pure contract logic: no SQLite, httpx or Textual imports live here."""
