"""Every model call goes through here: the gateway (routes, breakers, budget reservation and settlement) and the
validation ladder (repair, feedback, a stronger route, review).

May import: services, storage, adapters, core."""
