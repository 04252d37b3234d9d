"""Measuring the gate against recorded answers and a worst-case agent."""
