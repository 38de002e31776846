"""memframe: a small, lasting, human-editable memory for an AI assistant.

One plain-Markdown document per workspace, stored only as encrypted versions,
edited by people in the Memory frame and recalled in full by the Assistant.
"""

__version__ = "0.1.0"
