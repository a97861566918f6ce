"""Thin Lambda handlers: parse the event, call one domain function, return a model."""
