"""The stop-gradient collapse model of study 6: the gradient flow (``model``), its closed forms
(``theory``), the teacher-student variant (``student``) and the recorded runs (``training``)."""
