"""Reconcile EngramAgents: each agent's token Secret, the folded permission ConfigMap, and the
Ready status of every agent the fold touched.

A token is generated here, written once into its Secret, and reduced to its SHA-256 digest at
once; it never reaches a log line, a status, an event or the ConfigMap.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

from engram_contract.permissions import (
    CONFIGMAP_KEY,
    PermissionConfig,
    dump_permission_config,
    hash_token,
)
from engram_operator.builders import (
    Owner,
    build_agent_status,
    build_permission_configmap,
    build_token_patch,
    build_token_secret,
    decode_token,
)
from engram_operator.conditions import Refusal, utc_now
from engram_operator.context import Logger, OperatorContext
from engram_operator.drift import matches
from engram_operator.events import announce
from engram_operator.folding import AgentSnapshot, TokenState, Verdict, fold_agents
from engram_operator.kube import CONFIGMAPS, ENGRAM_AGENTS, SECRETS, Conflict, KubeError, NotFound
from engram_operator.naming import AGENT_KIND, API_VERSION, LEGACY_FINALIZER, token_secret_name

# secrets.token_urlsafe(32): 256 random bits, 43 characters.
TOKEN_BYTES: Final = 32
# A token someone put into the Secret by hand is kept if it is at least this long.
MIN_TOKEN_CHARS: Final = 32


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def snapshot_agent(body: Mapping[str, Any]) -> dict[None, AgentSnapshot]:
    """The index entry for one EngramAgent (every event, including deletions in progress)."""
    return {None: AgentSnapshot.from_body(body)}


async def reconcile_agent(
    ctx: OperatorContext, body: Mapping[str, Any], logger: Logger
) -> Refusal | None:
    """Bring one agent's Secret and the shared ConfigMap in line.

    Returns why the agent is not Ready when retrying cannot help before something changes (an
    invalid spec: the agent is left out of the config) or when kopf should retry (the
    ConfigMap could not be written); API refusals on the agent's own Secret are in its status.
    """
    snap = AgentSnapshot.from_body(body)
    owner = Owner.from_body(body)
    await drop_legacy_finalizer(ctx, body, logger)
    async with ctx.agents_lock:
        if snap.spec is not None:
            if snap.token_enabled:
                ctx.tokens[owner.uid] = await guarded_token(ctx, owner, logger)
            else:
                await guarded_drop(ctx, owner, logger)
        failure = await fold(ctx, logger)
    if snap.spec_error:
        return Refusal(snap.spec_error)
    if failure is not None:
        return Refusal(failure.describe(), permanent=failure.permanent)
    state = ctx.tokens.get(owner.uid)
    if state is not None and state.problem is not None and state.reason != "TokenSecretConflict":
        return Refusal(state.problem, permanent=not state.transient)
    return None


async def drop_legacy_finalizer(
    ctx: OperatorContext, body: Mapping[str, Any], logger: Logger
) -> None:
    """Remove the finalizer older releases shared (engram.dev/finalizer) from our own agent: this
    release's own finalizer replaces it, and nothing would remove the old one on deletion."""
    meta = body.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if LEGACY_FINALIZER not in finalizers:
        return
    kept = [name for name in finalizers if name != LEGACY_FINALIZER]
    try:
        # The resourceVersion makes the merge patch conditional: a list changed meanwhile
        # (kopf adding ours) is not overwritten; the next event retries.
        await ctx.api.patch(
            ENGRAM_AGENTS,
            str(meta.get("namespace")),
            str(meta.get("name")),
            {"metadata": {"finalizers": kept, "resourceVersion": meta.get("resourceVersion")}},
        )
    except KubeError as exc:
        logger.info("Left the legacy finalizer for now: %s", exc.describe())


async def delete_agent(ctx: OperatorContext, body: Mapping[str, Any], logger: Logger) -> None:
    async with ctx.agents_lock:
        await guarded_drop(ctx, Owner.from_body(body), logger)
        failure = await fold(ctx, logger)
    if failure is not None:
        raise failure


async def resync_agents(ctx: OperatorContext, logger: Logger) -> None:
    """Repair every live agent's token Secret, each on its own, then fold once."""
    async with ctx.agents_lock:
        for snap in _live(ctx):
            if snap.token_enabled:
                owner = Owner(API_VERSION, AGENT_KIND, snap.name, snap.namespace, snap.uid)
                ctx.tokens[snap.uid] = await guarded_token(ctx, owner, logger)
        failure = await fold(ctx, logger)
    if failure is not None:
        logger.warning("Resync could not write the permission config: %s", failure.describe())


async def guarded_token(ctx: OperatorContext, owner: Owner, logger: Logger) -> TokenState:
    """ensure_token, with an API refusal turned into the agent's problem: one agent's
    terminating namespace or missing Secret rights never holds up the others."""
    try:
        return await ensure_token(ctx, owner, logger)
    except KubeError as exc:
        logger.warning("Token Secret of %s/%s: %s", owner.namespace, owner.name, exc.describe())
        return TokenState(
            problem=f"the API server refused the token Secret "
            f"{owner.namespace}/{token_secret_name(owner.name)}: {exc.describe()}",
            reason=exc.reason or "SecretRefused",
            transient=not exc.permanent,
        )


def _live(ctx: OperatorContext) -> list[AgentSnapshot]:
    return [snap for store in ctx.agent_index.values() for snap in store if not snap.deleting]


async def ensure_token(ctx: OperatorContext, owner: Owner, logger: Logger) -> TokenState:
    """Make sure the agent's Secret holds a usable token; return its digest."""
    name = token_secret_name(owner.name)
    ref = f"{owner.namespace}/{name}"
    secret = await ctx.api.get(SECRETS, owner.namespace, name)
    if secret is None:
        token = new_token()
        try:
            await ctx.api.create(
                SECRETS, owner.namespace, build_token_secret(owner=owner, token=token)
            )
        except Conflict:
            secret = await ctx.api.get(SECRETS, owner.namespace, name)
            if secret is None:
                raise
        else:
            logger.info("Created token Secret %s.", ref)
            announce(owner.as_body(), reason="TokenCreated", message=f"Created Secret {ref}")
            return TokenState(sha256=hash_token(token))
    if not owner.owns(secret):
        return TokenState(
            problem=f"Secret {ref} exists and is not owned by this EngramAgent; "
            "delete or rename it so the operator can create the agent's token"
        )
    kept = decode_token(secret)
    if kept is not None and len(kept) >= MIN_TOKEN_CHARS:
        return TokenState(sha256=hash_token(kept))
    token = new_token()
    await ctx.api.patch(SECRETS, owner.namespace, name, build_token_patch(token))
    logger.info("Secret %s had no usable token; wrote a new one.", ref)
    announce(owner.as_body(), reason="TokenReplaced", message=f"Wrote a new token to {ref}")
    return TokenState(sha256=hash_token(token))


async def guarded_drop(ctx: OperatorContext, owner: Owner, logger: Logger) -> None:
    """drop_token, where a refusal is only logged: an agent without a token (or going away)
    has nothing to lose, and its Secret carries an owner reference, so garbage collection
    removes it anyway."""
    try:
        await drop_token(ctx, owner, logger)
    except KubeError as exc:
        logger.info(
            "Left the token Secret of %s/%s: %s", owner.namespace, owner.name, exc.describe()
        )


async def drop_token(ctx: OperatorContext, owner: Owner, logger: Logger) -> None:
    """Forget the agent's token and delete its Secret, if the Secret is ours."""
    ctx.tokens.pop(owner.uid, None)
    name = token_secret_name(owner.name)
    secret = await ctx.api.get(SECRETS, owner.namespace, name)
    owned = secret is not None and owner.owns(secret)
    if owned and await ctx.api.delete(SECRETS, owner.namespace, name):
        logger.info("Deleted token Secret %s/%s.", owner.namespace, name)


async def _read_token_state(ctx: OperatorContext, snap: AgentSnapshot) -> TokenState:
    """Digest of a token Secret this process has not handled yet (read-only)."""
    assert snap.token_secret is not None
    secret = await ctx.api.get(SECRETS, snap.namespace, snap.token_secret)
    if secret is None:
        return TokenState()
    owned = any(
        ref.get("uid") == snap.uid
        for ref in (secret.get("metadata") or {}).get("ownerReferences") or []
    )
    token = decode_token(secret)
    if not owned or token is None or len(token) < MIN_TOKEN_CHARS:
        # The agent's own reconcile explains or repairs this; until then it gets no token.
        return TokenState()
    return TokenState(sha256=hash_token(token))


async def fold(ctx: OperatorContext, logger: Logger) -> KubeError | None:
    """Write the permission config for all agents and update every agent's status.

    Callers hold ``ctx.agents_lock``. The index is read only now, so everything indexed before
    the lock was taken is included. Returns the API server's refusal of the ConfigMap, if any:
    every agent's status then says so.
    """
    live = _live(ctx)
    live_uids = {snap.uid for snap in live}
    for uid in list(ctx.tokens):
        if uid not in live_uids:
            del ctx.tokens[uid]
    for snap in live:
        if snap.token_enabled and snap.uid not in ctx.tokens:
            try:
                ctx.tokens[snap.uid] = await _read_token_state(ctx, snap)
            except KubeError as exc:
                ctx.tokens[snap.uid] = TokenState(
                    problem=f"the API server refused to read the token Secret: {exc.describe()}",
                    reason=exc.reason or "SecretRefused",
                )

    result = fold_agents(live, ctx.tokens, configmap=ctx.configmap_ref)
    verdicts = result.verdicts
    failure: KubeError | None = None
    try:
        await write_permission_config(ctx, result.config, logger)
    except KubeError as exc:
        failure = exc
        logger.warning("Could not write ConfigMap %s: %s", ctx.configmap_ref, exc.describe())
        verdicts = {
            uid: Verdict(
                False,
                exc.reason or "ConfigMapRefused",
                f"the API server refused the permission ConfigMap {ctx.configmap_ref}: "
                f"{exc.describe()}",
                agent_name=verdict.agent_name,
                token_secret=verdict.token_secret,
            )
            for uid, verdict in verdicts.items()
        }

    now = utc_now()
    for snap in live:
        verdict = verdicts[snap.uid]
        desired = build_agent_status(
            verdict=verdict, generation=snap.generation, previous=snap.status, now=now
        )
        if matches(desired, snap.status):
            continue
        if _ready_changed(snap.status, desired):
            announce(
                snap.as_body(),
                reason=verdict.reason,
                message=verdict.message,
                warning=not verdict.ready,
            )
        try:
            await ctx.api.patch(
                ENGRAM_AGENTS, snap.namespace, snap.name, {"status": desired}, subresource="status"
            )
        except NotFound:
            continue  # deleted meanwhile; its deletion folds again
        except KubeError as exc:
            logger.warning("Could not write the status of %s: %s", snap.ref, exc.describe())
    return failure


def _ready_changed(previous: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    def key(status: Mapping[str, Any]) -> tuple[Any, Any]:
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Ready":
                return cond.get("status"), cond.get("reason")
        return None, None

    return key(previous) != key(desired)


async def write_permission_config(
    ctx: OperatorContext, config: PermissionConfig, logger: Logger
) -> None:
    """Create or update the ConfigMap, only when its content differs."""
    settings = ctx.settings
    text = dump_permission_config(config)
    desired = build_permission_configmap(
        name=settings.configmap_name,
        namespace=settings.configmap_namespace,
        text=text,
        release=settings.release,
    )
    current = await ctx.api.get(CONFIGMAPS, settings.configmap_namespace, settings.configmap_name)
    if current is None:
        try:
            await ctx.api.create(CONFIGMAPS, settings.configmap_namespace, desired)
        except Conflict:
            current = await ctx.api.get(
                CONFIGMAPS, settings.configmap_namespace, settings.configmap_name
            )
            if current is None:
                raise
        else:
            logger.info(
                "Created ConfigMap %s with %d agents.", ctx.configmap_ref, len(config.agents)
            )
            return
    in_shape = (current.get("data") or {}).get(CONFIGMAP_KEY) == text and matches(
        desired["metadata"]["labels"], (current.get("metadata") or {}).get("labels")
    )
    if in_shape:
        return
    await ctx.api.patch(
        CONFIGMAPS,
        settings.configmap_namespace,
        settings.configmap_name,
        {"metadata": {"labels": desired["metadata"]["labels"]}, "data": desired["data"]},
    )
    logger.info("Updated ConfigMap %s: %d agents.", ctx.configmap_ref, len(config.agents))


async def ensure_permission_configmap(ctx: OperatorContext, logger: Logger) -> None:
    """At startup: if there is no ConfigMap yet, write one with no agents, so the service can
    start even before any EngramAgent exists. An existing one is left for the first fold."""
    settings = ctx.settings
    current = await ctx.api.get(CONFIGMAPS, settings.configmap_namespace, settings.configmap_name)
    if current is None:
        await write_permission_config(ctx, PermissionConfig(), logger)
