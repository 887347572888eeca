"""Policies that act in robosafe's simulator: the policy protocol, scripted, random and replay
policies, remote clients (DESIGN.md)."""
