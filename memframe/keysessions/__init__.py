"""Key sessions: workspace keys held in RAM only, for as long as a person lets the Assistant use them.

`store.py` is the in-RAM store (`KeySessions`) and the seam every server speaks (`KeySessionStore`);
`app.py` is the key-session service, that store over HTTP behind a credential, for several workers
or hosts; `client.py` is the one client (`RemoteKeySessions`), over TCP to `memframe keysessions
--listen` or over the unix socket of serve's own service (`private.py`).
"""
