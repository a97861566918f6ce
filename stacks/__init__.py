"""CDK stacks: one Stack that composes, one Construct per component."""
