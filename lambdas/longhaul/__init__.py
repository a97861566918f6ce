"""Longhaul domain package: contracts, pure logic and ports. Handlers in `handlers/` stay thin."""
