"""Adapters of the ports (`longhaul.core.ports`, `longhaul.core.llm`) to AWS and model providers: boto3 clients
(`aws.py`), Step Functions (engine, task tokens, webhook dispatch), ECS tasks, SQS intake queues and dead letters,
Secrets Manager, SES e-mail (`email.py`), and the model adapters (`models/`: Bedrock, OpenAI-compatible, offline,
record/replay).

May import: storage, core."""
