//! Pure preemption policies shared by the controller and the simulator.
