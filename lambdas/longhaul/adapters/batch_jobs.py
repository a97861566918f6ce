"""Bedrock's batch inference jobs (`bedrock` control plane): the batch lane's port (`core.ports.BatchJobs`). The
model fan-outs submit jobs; the sweeper reads and stops them (`longhaul.guardrails.batch`)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from longhaul.adapters import aws
from longhaul.adapters.models.bedrock import error_for


class BedrockBatchJobs:
    """Bedrock's batch inference jobs (`bedrock` control plane): the batch lane's port (`guardrails.batch.BatchJobs`).
    Records are in Converse's shape (`modelInvocationType=Converse`)."""

    def __init__(self, client: Any | None = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = aws.client("bedrock")
        return self._client

    def submit(
        self, *, name: str, model_id: str, role_arn: str, input_uri: str, output_uri: str, client_token: str
    ) -> str:
        try:
            answer = self.client.create_model_invocation_job(
                jobName=name,
                roleArn=role_arn,
                clientRequestToken=client_token,
                modelId=model_id,
                inputDataConfig={"s3InputDataConfig": {"s3Uri": input_uri, "s3InputFormat": "JSONL"}},
                outputDataConfig={"s3OutputDataConfig": {"s3Uri": output_uri}},
                modelInvocationType="Converse",
            )
        except ClientError as error:
            raise error_for(error, model_id, str(self.client.meta.region_name)) from error
        return str(answer["jobArn"])

    def status(self, arn: str) -> str:
        return str(self.client.get_model_invocation_job(jobIdentifier=arn)["status"])

    def stop(self, arn: str) -> None:
        try:
            self.client.stop_model_invocation_job(jobIdentifier=arn)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("ValidationException", "ConflictException"):
                raise
