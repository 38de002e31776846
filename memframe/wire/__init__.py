"""The wire format: the JSON bodies of memframe's HTTP API, as pydantic models and nothing more.

Both ends import these models: `memframe.api` answers with them and
`memframe.backend.remote` reads the answers back with the same ones, so the two
cannot drift apart. This package imports only `memframe.core` and pydantic: no
FastAPI, no service, no httpx.

* `base`       the shared bases (camelCase on the wire), strict base64, the error shape
* `files`      the people's file, history, workspace and policy routes
* `assistant`  the people's Assistant routes: AI consent, key sessions, sends, receipts, proposals
* `automation` the automation routes the Assistant's runtime (or an MCP bridge) calls

`*Out` models are read straight from the core dataclasses
(`VersionOut.model_validate(info)`), and `to_core` turns an answer back into one.
"""
