"""Container workers for heavy steps (run as ECS Fargate tasks resumed by task token; locally as subprocesses)."""
