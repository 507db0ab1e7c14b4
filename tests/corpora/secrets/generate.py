"""Write leaks.jsonl: generated FAKES of documented credential formats in realistic lines.

Every value is drawn from a seeded RNG (or is a vendor's own documented example value), so the
file is the same on every run and holds no real credential. Run from the repository root:

    .venv/bin/python tests/corpora/secrets/generate.py [OUT_DIR]

A test checks that the committed files are what this script writes.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).parent
SEED = 20261201
ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"

rng = random.Random(SEED)


def r(alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64_blob(nbytes: int) -> str:
    return base64.b64encode(bytes(rng.randrange(256) for _ in range(nbytes))).decode()


def pem(kind: str, nbytes: int = 600) -> str:
    body = b64_blob(nbytes)
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----"


def jwt() -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    head = part({"alg": "HS256", "typ": "JWT"})
    body = part({"sub": r(string.digits, 10), "name": "svc", "iat": 1764547200})
    return f"{head}.{body}.{r(URLSAFE, 43)}"


def aws_id() -> str:
    return rng.choice(["AKIA", "ASIA"]) + r(string.ascii_uppercase + "234567", 16)


def word() -> str:
    return rng.choice(["alpha", "delta", "orion", "atlas", "nova", "ember", "pine", "quartz"])


def pw() -> str:
    return rng.choice(["Tr0ub4dor&3", "hunter22", "S3cure!pass", "Winter2026!", "p@ssw0rd99"]) + (
        r(string.digits, 2)
    )


# kind -> (value generator, templates). Each template receives the fake as {s}.
Gen = Callable[[], str]
KINDS: dict[str, tuple[Gen, list[str]]] = {
    # ---- cloud
    "aws_access_key_id": (
        aws_id,
        [
            "export AWS_ACCESS_KEY_ID={s}",
            "The CI user's access key is {s}, region eu-west-1.",
            "aws configure set aws_access_key_id {s} --profile deploy",
        ],
    ),
    "aws_secret_access_key": (
        lambda: r(B64, 40),
        [
            "aws_secret_access_key = {s}",
            "AWS_SECRET_ACCESS_KEY={s}",
            '{{"AccessKeyId": "{id}", "SecretAccessKey": "{s}"}}',
        ],
    ),
    "gcp_service_account": (
        lambda: pem("PRIVATE KEY").replace("\n", "\\n"),
        [
            '{{"type": "service_account", "project_id": "demo-{w}", "private_key": "{s}"}}',
            'GOOGLE_CREDENTIALS=\'{{"type":"service_account","private_key":"{s}"}}\'',
            'service account json for the exporter: {{"private_key": "{s}"}}',
        ],
    ),
    "google_api_key": (
        lambda: "AIza" + r(URLSAFE, 35),
        [
            "Maps key for the web app: {s}",
            "GOOGLE_API_KEY={s}",
            "curl 'https://maps.googleapis.com/maps/api/geocode/json?key={s}'",
        ],
    ),
    "gemini_api_key": (
        lambda: "AIza" + r(URLSAFE, 35),
        [
            "GEMINI_API_KEY={s}",
            "client = genai.Client(api_key='{s}')",
            "Gemini key for the eval harness is {s}",
        ],
    ),
    "gcp_oauth_client_secret": (
        lambda: "GOCSPX-" + r(URLSAFE, 28),
        [
            'client_secret: "{s}"',
            "OAuth client secret for the login app: {s}",
            '{{"web": {{"client_id": "1234-abc.apps.googleusercontent.com", '
            '"client_secret": "{s}"}}}}',
        ],
    ),
    "azure_storage_connection_string": (
        lambda: b64_blob(64),
        [
            "DefaultEndpointsProtocol=https;AccountName=st{w}prod;AccountKey={s};EndpointSuffix=core.windows.net",
            "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=logs{w};AccountKey={s}",
            "storage account key for st{w}: {s}",
        ],
    ),
    "azure_ad_client_secret": (
        lambda: r(ALNUM, 3) + rng.choice(string.digits) + "Q~" + r(ALNUM + "_~.-", 34),
        [
            "AZURE_CLIENT_SECRET={s}",
            "app registration secret value: {s}",
            'azure: {{tenant: contoso, client_secret: "{s}"}}',
        ],
    ),
    "azure_sas_token": (
        lambda: r(B64, 43).replace("+", "%2B").replace("/", "%2F") + "%3D",
        [
            "https://st{w}.blob.core.windows.net/backups?sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=2027-01-01T00:00:00Z&sig={s}",
            "SAS for the upload container: sv=2022-11-02&sr=c&sp=racwl&sig={s}",
            "AZURE_SAS=?sv=2021-08-06&ss=bfqt&srt=sco&sp=rl&sig={s}",
        ],
    ),
    "alibaba_access_key": (
        lambda: "LTAI" + r(ALNUM, 20),
        [
            "ALIBABA_CLOUD_ACCESS_KEY_ID={s}",
            "阿里云的 AccessKey 是 {s}",
            "oss access key id {s} for bucket logs-cn",
        ],
    ),
    "digitalocean_token": (
        lambda: "dop_v1_" + r(HEX, 64),
        [
            "DIGITALOCEAN_TOKEN={s}",
            "doctl auth init --access-token {s}",
            "The droplet automation uses {s}",
        ],
    ),
    # ---- VCS
    "github_pat_classic": (
        lambda: "ghp_" + r(ALNUM, 36),
        [
            "git clone https://{s}@github.com/acme/infra.git",
            "GITHUB_TOKEN={s}",
            "Use my token {s} to push the release tag.",
        ],
    ),
    "github_fine_grained": (
        lambda: "github_pat_" + r(ALNUM, 22) + "_" + r(ALNUM, 59),
        [
            "GH_TOKEN={s}",
            "fine-grained PAT for the bot: {s}",
            'gh auth login --with-token <<< "{s}"',
        ],
    ),
    "github_oauth_app_tokens": (
        lambda: rng.choice(["gho_", "ghu_", "ghs_", "ghr_"]) + r(ALNUM, 36),
        [
            "installation token {s} expires in an hour",
            "Authorization: token {s}",
            "token={s}",
        ],
    ),
    "gitlab_pat": (
        lambda: "glpat-" + r(URLSAFE, 20),
        [
            "GITLAB_TOKEN={s}",
            "git remote set-url origin https://oauth2:{s}@gitlab.com/acme/api.git",
            "gitlab personal access token: {s}",
        ],
    ),
    "gitlab_runner_and_trigger": (
        lambda: rng.choice(["glrt-", "glptt-", "gldt-"]) + r(URLSAFE, 20),
        [
            "gitlab-runner register --token {s}",
            "CI trigger token {s} for the nightly pipeline",
            "deploy token {s} (read_registry)",
        ],
    ),
    "bitbucket_app_password": (
        lambda: "ATBB" + r(ALNUM, 32),
        [
            "BITBUCKET_APP_PASSWORD={s}",
            "bitbucket app password for ci-bot: {s}",
            "git clone https://ci-bot:{s}@bitbucket.org/acme/web.git",
        ],
    ),
    "atlassian_api_token": (
        lambda: "ATATT3xFfGF0" + r(URLSAFE, 180) + "=" + r(HEX.upper(), 8),
        [
            "JIRA_API_TOKEN={s}",
            "Atlassian token for the sync job: {s}",
            "confluence: {{user: bot@acme.io, api_token: {s}}}",
        ],
    ),
    # ---- payment
    "stripe_live_secret": (
        lambda: "sk_live_" + r(ALNUM, 24),
        [
            "STRIPE_SECRET_KEY={s}",
            'stripe.api_key = "{s}"',
            "Prod Stripe key is {s}, do not share.",
        ],
    ),
    "stripe_restricted": (
        lambda: "rk_live_" + r(ALNUM, 24),
        [
            "STRIPE_RESTRICTED_KEY={s}",
            "restricted key for the reporting job: {s}",
            "stripe:\n  key: {s}",
        ],
    ),
    "stripe_webhook_secret": (
        lambda: "whsec_" + r(ALNUM, 32),
        [
            "STRIPE_WEBHOOK_SECRET={s}",
            "webhook signing secret {s}",
            "endpoint_secret = '{s}'",
        ],
    ),
    "square_token": (
        lambda: "sq0atp-" + r(URLSAFE, 22),
        [
            "SQUARE_ACCESS_TOKEN={s}",
            "square prod token {s}",
            "square: {{access_token: {s}}}",
        ],
    ),
    "shopify_token": (
        lambda: rng.choice(["shpat_", "shpss_", "shpca_"]) + r(HEX, 32),
        [
            "SHOPIFY_ACCESS_TOKEN={s}",
            "X-Shopify-Access-Token: {s}",
            "the store admin token is {s}",
        ],
    ),
    # ---- messaging
    "slack_bot_token": (
        lambda: "xoxb-" + r(string.digits, 12) + "-" + r(string.digits, 13) + "-" + r(ALNUM, 24),
        [
            "SLACK_BOT_TOKEN={s}",
            "slack_token: {s}",
            "bot token for #alerts: {s}",
        ],
    ),
    "slack_user_and_app_tokens": (
        lambda: rng.choice(["xoxp-", "xapp-1-"]) + r(string.digits, 12) + "-" + r(ALNUM, 32),
        [
            "SLACK_APP_TOKEN={s}",
            "my slack user token {s}",
            "socket mode token {s}",
        ],
    ),
    "slack_webhook": (
        lambda: (
            "https://hooks.slack.com/services/T"
            + r(UPPER_ALNUM, 8)
            + "/B"
            + r(UPPER_ALNUM, 10)
            + "/"
            + r(ALNUM, 24)
        ),
        [
            "SLACK_WEBHOOK_URL={s}",
            "post alerts to {s}",
            "webhook: {s}",
        ],
    ),
    "twilio": (
        lambda: "AC" + r(HEX, 32),
        [
            "TWILIO_ACCOUNT_SID={s} TWILIO_AUTH_TOKEN=" + "{h32}",
            "twilio api key SK{h32} for sms",
            "twilio auth_token: {h32} (account {s})",
        ],
    ),
    "sendgrid": (
        lambda: "SG." + r(URLSAFE, 22) + "." + r(URLSAFE, 43),
        [
            "SENDGRID_API_KEY={s}",
            "sendgrid key {s}",
            "mail: {{provider: sendgrid, api_key: {s}}}",
        ],
    ),
    "mailgun": (
        lambda: "key-" + r(HEX, 32),
        [
            "MAILGUN_API_KEY={s}",
            "mailgun api key {s} for mg.acme.io",
            "curl -s --user 'api:{s}' https://api.mailgun.net/v3/mg.acme.io/messages",
        ],
    ),
    "mailchimp": (
        lambda: r(HEX, 32) + "-us" + str(rng.randrange(1, 21)),
        [
            "MAILCHIMP_API_KEY={s}",
            "mailchimp key {s}",
            "newsletter: {{mailchimp_api_key: {s}}}",
        ],
    ),
    "discord_bot_token": (
        lambda: rng.choice("MN") + r(ALNUM, 23) + "." + r(URLSAFE, 6) + "." + r(URLSAFE, 27),
        [
            "DISCORD_TOKEN={s}",
            "client.run('{s}')",
            "discord bot token: {s}",
        ],
    ),
    "discord_webhook": (
        lambda: f"https://discord.com/api/webhooks/{r(string.digits, 18)}/{r(URLSAFE, 68)}",
        [
            "DISCORD_WEBHOOK={s}",
            "release notes go to {s}",
            "webhook_url: {s}",
        ],
    ),
    "telegram_bot_token": (
        lambda: r(string.digits, 10) + ":AA" + r(URLSAFE, 33),
        [
            "TELEGRAM_BOT_TOKEN={s}",
            "https://api.telegram.org/bot{s}/sendMessage",
            "telegram bot token {s}",
        ],
    ),
    # ---- registries
    "npm_token": (
        lambda: "npm_" + r(ALNUM, 36),
        [
            "//registry.npmjs.org/:_authToken={s}",
            "NPM_TOKEN={s}",
            "npm publish token: {s}",
        ],
    ),
    "pypi_token": (
        lambda: "pypi-AgEIcHlwaS5vcmc" + r(URLSAFE, 70),
        [
            "TWINE_PASSWORD={s}",
            "[pypi]\nusername = __token__\npassword = {s}",
            "pypi upload token {s}",
        ],
    ),
    "docker_hub_pat": (
        lambda: "dckr_pat_" + r(URLSAFE, 27),
        [
            "DOCKERHUB_TOKEN={s}",
            "echo {s} | docker login -u acme --password-stdin",
            "docker hub PAT {s}",
        ],
    ),
    # ---- AI APIs
    "openai_api_key": (
        lambda: "sk-proj-" + r(URLSAFE, 74) + "T3BlbkFJ" + r(URLSAFE, 74),
        [
            "OPENAI_API_KEY={s}",
            'client = OpenAI(api_key="{s}")',
            "openai key for the summariser: {s}",
        ],
    ),
    "anthropic_api_key": (
        lambda: "sk-ant-api03-" + r(URLSAFE, 93) + "AA",
        [
            "ANTHROPIC_API_KEY={s}",
            "x-api-key: {s}",
            "Claude key for the agent is {s}",
        ],
    ),
    "huggingface_token": (
        lambda: "hf_" + r(string.ascii_letters, 34),
        [
            "HF_TOKEN={s}",
            "huggingface-cli login --token {s}",
            "HF read token {s}",
        ],
    ),
    "groq_and_replicate": (
        lambda: rng.choice(["gsk_" + r(ALNUM, 52), "r8_" + r(ALNUM, 37)]),
        [
            "GROQ_API_KEY={s}",
            "REPLICATE_API_TOKEN={s}",
            "inference key {s}",
        ],
    ),
    # ---- SaaS and infra
    "vault_token": (
        lambda: "hvs." + r(URLSAFE, 90),
        [
            "VAULT_TOKEN={s}",
            "vault login {s}",
            "root token after unseal: {s}",
        ],
    ),
    "datadog_api_key": (
        lambda: r(HEX, 32),
        [
            "DD_API_KEY={s}",
            "datadog_api_key: {s}",
            'datadog: {{"api_key": "{s}"}}',
        ],
    ),
    "newrelic_key": (
        lambda: "NRAK-" + r(UPPER_ALNUM, 27),
        [
            "NEW_RELIC_API_KEY={s}",
            "new relic user key {s}",
            "newrelic:\n  api_key: {s}",
        ],
    ),
    "linear_and_notion": (
        lambda: rng.choice(["lin_api_" + r(ALNUM, 40), "ntn_" + r(ALNUM, 46)]),
        [
            "LINEAR_API_KEY={s}",
            "NOTION_TOKEN={s}",
            "integration secret {s}",
        ],
    ),
    "postman_api_key": (
        lambda: "PMAK-" + r(HEX, 24) + "-" + r(HEX, 34),
        [
            "POSTMAN_API_KEY={s}",
            "postman key {s}",
            "x-api-key: {s}",
        ],
    ),
    "databricks_token": (
        lambda: "dapi" + r(HEX, 32),
        [
            "DATABRICKS_TOKEN={s}",
            "databricks pat {s} for the warehouse",
            "token = {s}",
        ],
    ),
    "grafana_token": (
        lambda: "glsa_" + r(ALNUM, 32) + "_" + r(HEX, 8),
        [
            "GRAFANA_TOKEN={s}",
            "grafana service account token {s}",
            "Authorization: Bearer {s}",
        ],
    ),
    # ---- databases
    "postgres_url": (
        lambda: pw(),
        [
            "DATABASE_URL=postgres://app:{s}@db.internal:5432/app",
            "psql postgresql://admin:{s}@10.0.3.4/prod",
            "sqlalchemy.url = postgresql+psycopg://svc:{s}@pg:5432/orders",
        ],
    ),
    "mysql_url": (
        lambda: pw(),
        [
            "MYSQL_URL=mysql://root:{s}@mysql.prod:3306/shop",
            "jdbc:mysql://db:3306/app?user=app&password={s}",
            "mysql+pymysql://report:{s}@10.1.2.3/analytics",
        ],
    ),
    "mongodb_url": (
        lambda: pw(),
        [
            "MONGO_URI=mongodb+srv://app:{s}@cluster0.ab12c.mongodb.net/prod",
            "mongodb://admin:{s}@mongo-0.mongo:27017/?authSource=admin",
            "connect with mongodb+srv://reader:{s}@analytics.x9y8z.mongodb.net",
        ],
    ),
    "redis_url": (
        lambda: pw(),
        [
            "REDIS_URL=redis://:{s}@redis.internal:6379/0",
            "rediss://default:{s}@cache.upstash.io:6380",
            "celery broker redis://:{s}@10.0.0.5:6379/1",
        ],
    ),
    "amqp_url": (
        lambda: pw(),
        [
            "AMQP_URL=amqp://guest:{s}@rabbit:5672/",
            "broker_url = 'amqps://worker:{s}@mq.acme.io/vhost'",
            "rabbitmq connection amqp://svc:{s}@10.2.0.9:5672",
        ],
    ),
    # ---- private keys, JWTs
    "pem_private_keys": (
        lambda: pem(
            rng.choice(
                ["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY"]
            )
        ),
        [
            "{s}",
            "Here is the TLS key for the ingress:\n{s}",
            "tls.key: |\n  {s}",
        ],
    ),
    "ssh_private_keys": (
        lambda: pem(rng.choice(["OPENSSH PRIVATE KEY", "DSA PRIVATE KEY"]), 400),
        [
            "deploy key for the bastion:\n{s}",
            "~/.ssh/id_ed25519 contains\n{s}",
            "{s}",
        ],
    ),
    "pgp_private_key": (
        lambda: pem("PGP PRIVATE KEY BLOCK", 500),
        [
            "{s}",
            "signing key for releases:\n{s}",
            "gpg --import <<EOF\n{s}\nEOF",
        ],
    ),
    "jwt": (
        jwt,
        [
            "Authorization: Bearer {s}",
            "session cookie was {s}",
            "id_token={s}",
        ],
    ),
    "basic_auth_header": (
        lambda: base64.b64encode(f"admin:{pw()}".encode()).decode(),
        [
            "Authorization: Basic {s}",
            "curl -H 'Authorization: Basic {s}' https://api.acme.io",
            "proxy header Proxy-Authorization: Basic {s}",
        ],
    ),
    "url_basic_auth": (
        lambda: pw(),
        [
            "https://deploy:{s}@artifacts.acme.io/repo",
            "curl -u admin:{s} https://jenkins.acme.io/api/json",
            "ftp://backup:{s}@ftp.acme.io/nightly",
        ],
    ),
    # ---- Engram's own tokens
    "engram_token": (
        lambda: "engram_" + r(URLSAFE, 43),
        [
            "Authorization: Bearer {s}",
            "my engram token is {s}",
            "ENGRAM_TOKEN={s}",
        ],
    ),
    # ---- assignments and prose (the generic shapes)
    "password_assignment": (
        pw,
        [
            "DB_PASSWORD={s}",
            "password: {s}",
            "spring.datasource.password={s}",
        ],
    ),
    "secret_assignment": (
        lambda: r(ALNUM, 24),
        [
            "secret = {s}",
            'SECRET_KEY = "{s}"',
            "jwt_secret: '{s}'",
        ],
    ),
    "json_api_key": (
        lambda: r(ALNUM, 32),
        [
            '{{"api_key": "{s}"}}',
            '{{"apiKey":"{s}","region":"us"}}',
            "{{'client_secret': '{s}'}}",
        ],
    ),
    "yaml_credentials": (
        lambda: r(ALNUM + "!@#%", 18),
        [
            "credentials:\n  username: svc\n  password: {s}",
            "auth:\n  token: {s}",
            'db:\n  host: pg\n  passwd: "{s}"',
        ],
    ),
    "hex_api_secret": (
        lambda: r(HEX, 64),
        [
            "api secret: {s}",
            "API_SECRET={s}",
            "the api secret is {s}",
        ],
    ),
    "password_in_prose_en": (
        pw,
        [
            "The admin password for prod: {s}",
            "my password is {s}",
            "FYI the wifi password is now {s}",
            "Log in as root with password {s} and rotate it after.",
        ],
    ),
    "password_in_prose_zh": (
        pw,
        [
            "我的密码是 {s}",
            "生产数据库的口令是{s}，别外传",  # noqa: RUF001
            "服务器密码：{s}",  # noqa: RUF001
            "管理员密钥为 {s}",
            "访问令牌是 {s}",
        ],
    ),
    # ---- evasions: the same credentials disguised
    "aws_key_spaced": (
        aws_id,
        ["{sp}", "key id: {sp}", "{dash}"],
    ),
    "aws_key_split": (
        aws_id,
        [
            'key = "{a}" + "{b}"',
            "key id {a} {b}",
            "{a}\n{b}",
        ],
    ),
    "zero_width": (
        lambda: "ghp_" + r(ALNUM, 36),
        ["token {zw}", "GITHUB_TOKEN={zw}", "{zw}"],
    ),
    "full_width": (
        lambda: "sk_live_" + r(ALNUM, 24),
        ["stripe {fw}", "{fw}", "key：{fw}"],  # noqa: RUF001
    ),
    "base64_wrapped": (
        lambda: rng.choice(
            ["ghp_" + r(ALNUM, 36), "sk_live_" + r(ALNUM, 24), "AKIA" + r(UPPER_ALNUM, 16)]
        ),
        ["encoded: {b64}", "{b64}", "config blob {b64} (base64)"],
    ),
}

ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


def full_width(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def render(template: str, s: str) -> str:
    cut = rng.randrange(6, len(s) - 4) if len(s) > 10 else len(s) // 2
    zw = "".join(c + (rng.choice(ZERO_WIDTH) if i % 5 == 4 else "") for i, c in enumerate(s))
    return template.format(
        s=s,
        w=word(),
        id=aws_id(),
        h32=r(HEX, 32),
        sp=" ".join(s[i : i + 4] for i in range(0, len(s), 4)),
        dash="-".join(s[i : i + 5] for i in range(0, len(s), 5)),
        a=s[:cut],
        b=s[cut:],
        zw=zw,
        fw=full_width(s),
        b64=base64.b64encode(f"token={s}".encode()).decode() if "{b64}" in template else "",
    )


def leaks() -> list[dict[str, str]]:
    out = []
    for kind, (gen, templates) in KINDS.items():
        for template in templates:
            out.append({"kind": kind, "text": render(template, gen())})
    return out


SERVICES = [
    "stripe",
    "github",
    "gitlab",
    "slack",
    "openai",
    "aws",
    "postgres",
    "redis",
    "sentry",
    "datadog",
    "twilio",
    "sendgrid",
    "npm",
    "pypi",
    "docker",
    "vault",
    "grafana",
    "jira",
]
ENVS = ["prod", "staging", "dev", "ci"]
BENIGN_TEMPLATES = [
    "The {svc} token expires in {n} minutes",
    "The {svc} API key is stored in vault at kv/{env}/{svc}",
    "{SVC}_API_KEY is read from the environment at startup",
    "{SVC}_PASSWORD_FILE=/run/secrets/{svc}_password",
    "The {svc} secret was rotated on 2026-{m:02d}-{d:02d}",
    "max_tokens: {n}",
    "{svc} tokens are limited to {n} requests per hour",
    "{svc} 的令牌 {n} 分钟后过期",
    "{svc} 的 API 密钥存放在保险库的 kv/{env}/{svc} 下",
    "{env} 环境的 {svc} 密码每 {n} 天轮换一次",
    "Ask the {env} on-call for the {svc} password; it is in the team vault",
    "{svc}_token: ${{{{ secrets.{SVC}_TOKEN }}}}",
]


def benign() -> list[str]:
    brng = random.Random(SEED + 1)
    out = []
    for template in BENIGN_TEMPLATES:
        for _ in range(14):
            svc = brng.choice(SERVICES)
            out.append(
                template.format(
                    svc=svc,
                    SVC=svc.upper(),
                    env=brng.choice(ENVS),
                    n=brng.choice([5, 15, 30, 60, 90, 500, 1000, 4096, 8192, 100000]),
                    m=brng.randrange(1, 12),
                    d=brng.randrange(1, 28),
                )
            )
    return sorted(set(out))


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    (out / "benign_generated.txt").write_text("\n".join(benign()) + "\n", encoding="utf-8")
    rows = leaks()
    with (out / "leaks.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} leaks in {len(KINDS)} kinds -> {out / 'leaks.jsonl'}")


if __name__ == "__main__":
    main()
