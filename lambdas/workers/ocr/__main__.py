"""`python -m workers.ocr`: the OCR worker's entrypoint, the same on ECS Fargate and in the local runtime."""

import sys

from workers.ocr.entrypoint import main

sys.exit(main())
