"""The main screen's widgets: the Markdown editor with its preview, the status bar and message line."""
