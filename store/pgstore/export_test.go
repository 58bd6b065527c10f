package pgstore

// Silence makes s announce none of its commits, as if every notification were lost.
// Call it before s commits.
func Silence(s *Store) { s.follow.silent = true }

// Listening returns a channel closed once s's listener first listens for announcements.
func Listening(s *Store) <-chan struct{} { return s.follow.heard }
