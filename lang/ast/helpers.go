package ast

// SplitOptions returns the option groups written before WHERE and those written after
// it (or after the pattern when there is no WHERE). Groups without positions count as
// written after WHERE.
func (s *WatchStmt) SplitOptions() (before, after []*OptionList) {
	for _, o := range s.Options {
		if s.Where != nil && o.Pos().IsValid() && s.Where.Pos().IsValid() && o.Pos() < s.Where.Pos() {
			before = append(before, o)
		} else {
			after = append(after, o)
		}
	}
	return before, after
}
