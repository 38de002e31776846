"""Where sealed things belong: the associated data that binds each ciphertext to its place.

The server stores these ciphertexts and the client opens them, so both must
name the place identically; a ciphertext moved to another place fails to open.
"""

from __future__ import annotations

from memframe.core.types import MEMORY_PATH


def proposal_path(proposal_id: str) -> str:
    """A proposal's sealed edits are bound to that proposal, never to the memory itself."""
    return f"{MEMORY_PATH}#proposal/{proposal_id}"


def transcript_path(conversation_id: str) -> str:
    """A conversation's sealed messages are bound to that conversation."""
    return f"conversations/{conversation_id}"
