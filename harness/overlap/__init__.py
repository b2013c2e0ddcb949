"""Work beside training and scoring: compile ahead, plan ahead, the report in its own process."""
