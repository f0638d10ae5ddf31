"""The ``auth`` setting of a remote server entry: which OAuth grant to use, with which client, and where
its tokens are kept."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swift_rlfactory.bundled.models import cache_dir

# Where the authorization server sends the browser back after a login. The headless flow never listens
# there (it reads the redirect's Location); ``tools login`` does. Fixed, so one registration serves both.
DEFAULT_CALLBACK_PORT = 33418

# Other clients' keys of the same object: Cursor's ``auth`` (``CLIENT_ID``, ``CLIENT_SECRET``), Gemini CLI's
# and Claude Code's ``oauth`` (camelCase). Gemini's endpoints and redirect are found by discovery here.
_SPELLINGS = {
    "CLIENT_ID": "client_id", "clientId": "client_id", "CLIENT_SECRET": "client_secret",
    "clientSecret": "client_secret", "callbackPort": "callback_port", "tokenStore": "token_store",
}  # fmt: skip
_DISCOVERED = ("enabled", "authorizationUrl", "tokenUrl", "redirectUri", "audiences", "issuer")


class OAuthSettings(BaseModel):
    """``auth: oauth``, or ``auth: {type: oauth, ...}`` with these keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["oauth"] = "oauth"
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    client_id: str | None = Field(default=None, min_length=1)
    client_secret: str | None = Field(default=None, min_length=1, repr=False)
    private_key: str | None = Field(default=None, min_length=1, repr=False)  # PEM: private_key_jwt
    signing_algorithm: str = "RS256"
    scopes: list[str] | None = None
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    client_metadata_url: str | None = None
    callback_port: int = Field(default=DEFAULT_CALLBACK_PORT, ge=1, le=65535)
    token_store: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            if data.strip().lower() != "oauth":
                raise ValueError(f"'auth' must be 'oauth' or a mapping with type: oauth, not {data!r}")
            return {}
        if not isinstance(data, dict):
            return data
        data = {_SPELLINGS.get(k, k): v for k, v in data.items() if k not in _DISCOVERED}
        if isinstance(data.get("scopes"), str):
            data["scopes"] = data["scopes"].split()
        return data

    @model_validator(mode="after")
    def _grant_needs(self) -> OAuthSettings:
        if self.grant == "client_credentials" and not (
            self.client_id and (self.client_secret or self.private_key)
        ):
            raise ValueError(
                "grant client_credentials needs 'client_id' and 'client_secret' (or 'private_key')"
            )
        if (self.client_secret or self.private_key) and not self.client_id:
            given = "client_secret" if self.client_secret else "private_key"
            raise ValueError(f"'{given}' needs the 'client_id' it belongs to")
        if self.private_key and (self.client_secret or self.grant != "client_credentials"):
            raise ValueError(
                "'private_key' (a signed client assertion) is for grant client_credentials, without a secret"
            )
        return self

    @property
    def scope(self) -> str | None:
        """The scopes as OAuth sends them (one space-separated string), or ``None`` for the server's."""
        return " ".join(self.scopes) if self.scopes else None

    def store_path(self, server_url: str) -> Path:
        """The token store file: ``token_store``, else one per server URL under the cache folder."""
        if self.token_store:
            return Path(self.token_store).expanduser()
        digest = hashlib.sha256(f"{self.grant} {self.client_id} {server_url}".encode()).hexdigest()[:16]
        return cache_dir().expanduser() / "mcp-oauth" / f"{digest}.json"
