//! The IVF's search against brute force over exactly the lists it probes.
use super::*;
use crate::search::kmeans::train;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;

/// With a few lists probed, a query's candidates are the best of exactly the vectors filed
/// (first or second) under a probed list, each found once, some through their second list.
#[test]
fn spilled_entries_are_found_once_and_only_where_probed() {
    let (dim, n, lists, probes, count) = (16, 3000, 40, 6, 30);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut random =
        |rows: usize| -> Vec<f32> { (0..rows * dim).map(|_| rng.random::<f32>() - 0.5).collect() };
    let (data, queries) = (random(n), random(50));
    let unit = unit_rows(&data, dim);
    let centroids = train(&unit[..1000 * dim], dim, lists, 1).unwrap();
    let mut ivf = Ivf::new(dim, centroids.clone());
    ivf.add(0, &data[..1500 * dim]).unwrap();
    ivf.add(1500, &data[1500 * dim..]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.ivf");
    ivf.save(&path).unwrap();
    let ivf = Ivf::load(&path, dim).unwrap();
    let q = Embeddings {
        dim,
        data: queries.clone(),
    };
    let got = ivf.nearest(&q, count, probes).unwrap();
    let filed = assign_spilled(&unit, &centroids, dim).unwrap();
    let uq = unit_rows(&queries, dim);
    let probed = nearest_centroids(&uq, &centroids, dim, probes).unwrap();
    let mut via_second = 0;
    for (i, found) in got.iter().enumerate() {
        let p: HashSet<u32> = probed[i * probes..(i + 1) * probes]
            .iter()
            .map(|x| x.0)
            .collect();
        let mut eligible: Vec<(u32, f32)> = (0..n)
            .filter(|&r| p.contains(&filed[r].0) || p.contains(&filed[r].1))
            .map(|r| {
                let x = &unit[r * dim..(r + 1) * dim];
                let s = x
                    .iter()
                    .zip(&uq[i * dim..(i + 1) * dim])
                    .map(|(a, b)| a * b);
                (r as u32, s.sum())
            })
            .collect();
        keep_best(&mut eligible, count);
        let want: HashSet<usize> = eligible.iter().map(|e| e.0 as usize).collect();
        let have: HashSet<usize> = found.iter().copied().collect();
        assert_eq!(have.len(), found.len(), "query {i}: a row found twice");
        assert!(
            have.iter()
                .all(|&r| p.contains(&filed[r].0) || p.contains(&filed[r].1)),
            "query {i}: a row from a list not probed"
        );
        // f16 copies may swap the last places
        assert!(have.intersection(&want).count() >= count - 2, "query {i}");
        via_second += have.iter().filter(|&&r| !p.contains(&filed[r].0)).count();
    }
    assert!(via_second > 0, "no candidate came through a second list");
    eprintln!(
        "{via_second} of {} candidates through their second list",
        50 * count
    );

    // without its second lists (dropped, saved, read back) each vector is in its first alone
    let mut ivf = ivf;
    let before = ivf.scanned(&q, probes).unwrap();
    assert!(ivf.drop_second_lists() && !ivf.drop_second_lists());
    let after = ivf.scanned(&q, probes).unwrap();
    assert!(after < 0.6 * before, "{after} entries a query vs {before}");
    ivf.save(&path).unwrap();
    let ivf = Ivf::load(&path, dim).unwrap();
    for (i, found) in ivf.nearest(&q, count, probes).unwrap().iter().enumerate() {
        let p: HashSet<u32> = probed[i * probes..(i + 1) * probes]
            .iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(found.len(), count);
        assert!(found.iter().all(|&r| p.contains(&filed[r].0)), "query {i}");
    }
}
