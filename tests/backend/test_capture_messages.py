"""Why the Assistant wrote a capture, through every backend kind: ids from the server, text opened here."""

from __future__ import annotations

from memframe.core.types import Mode
from tests.conftest import World


def test_each_capture_names_its_conversation_and_the_persons_message(world: World) -> None:
    b = world.client()
    b.save("# Memory\n- likes tea\n", 0)
    b.set_ai(True)
    b.set_policy(Mode.AUTO, 0)
    b.send("c1", "hello")
    assert b.send("c1", "remember: - likes jam").remembered
    b.save(b.load().text + "- by hand\n", 2)
    assert b.send("c2", "remember: - likes scones").remembered
    found = b.capture_messages()
    assert sorted(found) == [2, 4]
    assert (found[2].conversation_id, found[2].message) == ("c1", "remember: - likes jam")
    assert (found[4].conversation_id, found[4].message) == ("c2", "remember: - likes scones")
    assert found[2].admission_id != found[4].admission_id


def test_another_members_conversations_are_not_listed(world: World) -> None:
    """A conversation is its person's alone: bob sees alice's capture in the history, not where it came from."""
    b = world.client()
    b.save("x\n", 0)
    b.set_ai(True)
    b.set_policy(Mode.AUTO, 0)
    assert b.send("c1", "remember: - likes jam").remembered
    world.service.accounts.add_user("bob", exist_ok=True)
    world.service.accounts.add_member(world.workspace_id, "bob")
    bob = World(world.kind, world.service, world.workspace_id, world.key, "bob", world.make)
    try:
        assert bob.client().capture_messages() == {}
    finally:
        bob.close()
