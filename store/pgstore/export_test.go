package pgstore

// Silence makes s announce none of its commits, as if every notification were lost.
// Call it before s commits.
func Silence(s *Store) { s.follow.silent = true }
