"""Completion webhooks: callback URL checks, Standard Webhooks signing and verification, the outbox, delivery."""
