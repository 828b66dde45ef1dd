-- 0009: a placeholder on this branch only, so that migrations stay numbered 1..N: number 9 belongs
-- to another change of issue 28, whose file replaces this one when the branches are merged.
-- additive: changes nothing.
SELECT 1;
