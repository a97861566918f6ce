"""Identity: who may sign in to the API with a JWT beside the API keys.

By default a Cognito user pool and one app client: people are created by the platform team (no self sign-up), each
with the custom attributes `tenant` (set once, at creation) and `role` (`tenant`, `reviewer` or `operator`), and a
reviewer's groups are the pool's groups it belongs to. The API takes the pool's ID token (its `aud` is the app
client's id; it holds the custom attributes as `custom:tenant`, `custom:role` and the groups as `cognito:groups`).
The app client may write no custom attribute, so nobody can change their own tenant or role.

With `-c longhaul:oidc_issuer=https://…` (and `longhaul:oidc_audience`) an external issuer is trusted instead and no
user pool is created; its claim names are context too (`longhaul:oidc_tenant_claim`, `…_role_claim`,
`…_groups_claim`). Either way the API's authorizer gets the `LONGHAUL_OIDC_*` settings (`environment`).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_cognito as cognito
from constructs import Construct

from longhaul.core.settings import Env
from stacks.nag import acknowledge

#: What an ID token of the pool lives (minutes): a JWT cannot be revoked, so this is how long a disabled person's
#: last token still works. Cognito's shortest is 5.
ID_TOKEN_MINUTES = 15
#: The claim-name context keys and the settings they set.
CLAIM_CONTEXT = {
    "tenant": Env.OIDC_TENANT_CLAIM,
    "role": Env.OIDC_ROLE_CLAIM,
    "groups": Env.OIDC_GROUPS_CLAIM,
}


class IdentityConfigError(ValueError):
    """The issuer context is incomplete or not https."""


class Identity(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        issuer: str | None = None,
        audience: str | None = None,
        jwks_url: str | None = None,
        claims: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.user_pool: cognito.UserPool | None = None
        self.client: cognito.UserPoolClient | None = None
        if issuer:  # checked at synthesis: a wrong issuer fails here, not at every request
            if urlsplit(issuer).scheme != "https" or not urlsplit(issuer).hostname:
                raise IdentityConfigError(f"longhaul:oidc_issuer must be an https URL, not {issuer!r}")
            if not audience:
                raise IdentityConfigError("longhaul:oidc_issuer needs longhaul:oidc_audience (the tokens' `aud`)")
            if jwks_url and urlsplit(jwks_url).scheme != "https":
                raise IdentityConfigError(f"longhaul:oidc_jwks_url must be an https URL, not {jwks_url!r}")
            self.issuer, self.audience = issuer, audience
        else:
            self.user_pool, self.client = self._user_pool(removal_policy)
            self.issuer = f"https://cognito-idp.{Aws.REGION}.{Aws.URL_SUFFIX}/{self.user_pool.user_pool_id}"
            self.audience = self.client.user_pool_client_id
        unknown = set(claims or {}) - set(CLAIM_CONTEXT)
        if unknown:
            raise IdentityConfigError(f"unknown claim mapping {sorted(unknown)}; expected {sorted(CLAIM_CONTEXT)}")
        self.environment: dict[str, str] = {Env.OIDC_ISSUER: self.issuer, Env.OIDC_AUDIENCE: self.audience}
        if jwks_url:
            self.environment[Env.OIDC_JWKS_URL] = jwks_url
        for name, value in (claims or {}).items():
            if value:
                self.environment[CLAIM_CONTEXT[name]] = value

    def _user_pool(self, removal_policy: RemovalPolicy) -> tuple[cognito.UserPool, cognito.UserPoolClient]:
        pool = cognito.UserPool(
            self,
            "Users",
            self_sign_up_enabled=False,  # the platform team creates people, with their tenant and role
            sign_in_aliases=cognito.SignInAliases(email=True),
            custom_attributes={
                "tenant": cognito.StringAttribute(min_len=1, max_len=128, mutable=False),
                "role": cognito.StringAttribute(min_len=1, max_len=16, mutable=True),
            },
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            removal_policy=removal_policy,
        )
        client = pool.add_client(
            "Api",
            auth_flows=cognito.AuthFlow(user_srp=True),
            generate_secret=False,  # the command line and the console are public clients
            disable_o_auth=True,  # no hosted sign-in domain: SRP through the SDKs
            prevent_user_existence_errors=True,
            id_token_validity=Duration.minutes(ID_TOKEN_MINUTES),
            access_token_validity=Duration.minutes(ID_TOKEN_MINUTES),
            refresh_token_validity=Duration.hours(12),
            read_attributes=cognito.ClientAttributes()
            .with_standard_attributes(email=True, email_verified=True, fullname=True)
            .with_custom_attributes("tenant", "role"),
            # only a person's own name: never the tenant or the role (a user could otherwise make itself an operator)
            write_attributes=cognito.ClientAttributes().with_standard_attributes(fullname=True),
        )
        for rule in ("COG3", "COG8"):
            acknowledge(
                pool,
                rule,
                "Threat protection (advanced security) needs Cognito's Plus feature plan, billed per user; the "
                "platform team chooses it for its account. Everyone signs in with MFA (TOTP) on the Essentials plan.",
            )
        return pool, client
