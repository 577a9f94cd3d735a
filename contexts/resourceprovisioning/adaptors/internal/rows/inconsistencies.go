package rows

import "github.com/pharos-metallo/metallo/contexts/resourceprovisioning/domain"

// GroupAmbiguous folds (Project, Site, allocation) rows, sorted by all
// three, into ambiguous resources.
func GroupAmbiguous(n int, row func(i int) (project, site, allocation string)) []domain.AmbiguousResource {
	out := []domain.AmbiguousResource{}
	for i := range n {
		p, s, a := row(i)
		if k := len(out) - 1; k >= 0 && out[k].ProjectID == p && out[k].Site == s {
			out[k].AllocationIDs = append(out[k].AllocationIDs, a)
			continue
		}
		out = append(out, domain.AmbiguousResource{ProjectID: p, Site: s, AllocationIDs: []string{a}})
	}
	return out
}
